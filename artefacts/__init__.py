"""The artefacts on disk between capture and ingest, each defined once: the
run folder (run_folder.py) and the tcp_probe record (probe_record.py)."""
