"""Acting on many jobs at once (the queue page's checkboxes): the selected
ids in one request (`selection`), every job matching a tab as a server-side
batch (`records` in Redis, `steps` of one chunk each, run by the `runner`
thread), and the JSON Lines export (`export`)."""
