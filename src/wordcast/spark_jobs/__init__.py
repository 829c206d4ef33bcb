"""PySpark jobs. Each job module keeps pure DataFrame -> DataFrame transforms apart from a thin
``main`` that does the I/O, so tests run the transforms on a shared local SparkSession."""
