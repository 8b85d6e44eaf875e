"""Labels from a fixed set: codebooks and their prompts, debias methods for the listing order, annotations with
their provenance, calibration on hand-coded texts, and validation and agreement against human coding."""
