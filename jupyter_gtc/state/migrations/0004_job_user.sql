-- The Slurm user a job runs as: recorded at submit (the submitting process's user) and
-- corrected by the poller from squeue's user_name. NULL for jobs recorded before this column.
ALTER TABLE jobs ADD COLUMN user TEXT;
