"""What a run says: table, JSON, JUnit and Markdown reports, the Prometheus textfile, the fleet
view."""
