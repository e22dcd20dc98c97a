"""`kb`: the knowledge-base service's command line. It talks to the API over HTTP only."""
__version__ = "0.1.0"
