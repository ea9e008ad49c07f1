"""The results database: analysed runs in one SQLite file (db.py), bulk-written through a
SQLite image of integer columns (sqlite_image.py)."""
