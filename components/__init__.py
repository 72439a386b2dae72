"""aicluster: one cluster spec -> a balanced AI training cluster on AWS or GCP, with Pulumi."""
