-- Databases and roles for a docker-compose deployment: Airflow's own database and the ACID metastore.
CREATE ROLE airflow LOGIN PASSWORD 'airflow';
CREATE DATABASE airflow OWNER airflow;
CREATE ROLE acid LOGIN PASSWORD 'acid';
CREATE DATABASE acid_metastore OWNER acid;
