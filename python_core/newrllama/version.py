"""The release, in one place: the package, results files and provenance records name it."""
__version__ = "0.1.0"
