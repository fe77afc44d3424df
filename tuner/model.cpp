// placeholder: implemented in this submission
