"""Studies: thousands of questions at once (a grid of axes or a list), answered on Dask, resumable, summarised.

``spec`` parses a study file into questions identified by a hash of their resolved inputs; ``execute`` answers a
batch on a worker (questions differing only in their target share one prepared model); ``runner`` sends batches to
an embedded LocalCluster or a running scheduler and writes rows in chunks (``store``); ``summary`` draws the faceted
plot and the markdown table. dask.distributed and pyarrow are imported only when a study runs.

May import: the public API (``roofline_opt.api``), the report, the catalog, the physics specs and the base modules.
"""

from roofline_opt.study.spec import Study, StudyQuestion, load_study

__all__ = ["Study", "StudyQuestion", "load_study"]
