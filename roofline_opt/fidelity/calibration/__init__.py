"""Calibration: engine-profile efficiencies fitted to measured rows (``calibrate``), from step components evaluated
once (``components``) by a regularised, bounded fit with identification and leave-one-out errors (``fit``)."""
