"""Labels from a fixed set: codebooks and their prompts, order cures, annotations with their provenance,
calibration on hand-coded texts, and validation and agreement against human coding."""
