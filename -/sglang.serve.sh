#!/bin/sh
# sglang (0.5.23) recipe for deepseek-v3: 1 x agg h200 tp8pp1ep8 dp-attention batch 230; 8-bit weights, 16-bit KV
# one command per server kind; run `count` copies of each (the Kubernetes manifests do).

# agg: 1 x 8 x h200
python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --host 0.0.0.0 --port 30000 --tp-size 8 --attn-dp-size 8 --ep-size 8 --max-running-requests 230 --chunked-prefill-size 8192 --quantization fp8 --speculative-algorithm NEXTN --speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 2 --mem-fraction-static 0.897 --context-length 2000
