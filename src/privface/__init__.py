"""privface — face recognition in which nobody sees a face template in the clear."""
__version__ = "0.1.0"
