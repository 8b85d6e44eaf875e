"""One decode step and what it serves: the requests and their state, the step's assembly and its events, the
scheduler that acts on them, the prefixes a request shares, label paths and their scoring, stop strings, the C
samplers, and the results and progress reported to callers."""
