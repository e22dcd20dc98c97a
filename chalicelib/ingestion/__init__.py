"""Ingestion: S3 events start the Step Functions pipeline whose steps live in steps.py."""
