# hash tests
