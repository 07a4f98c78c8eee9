"""Presentation: terminal tables, JSON/CSV exports and plots."""
