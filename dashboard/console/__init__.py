"""The operator app (`dashboard.console`, app label `dashboard`): the pages,
their actions and fragments, live updates over websockets, /metrics and the
probes, the audit log and the view/operate/scale permissions. It uses the
shared leaf (dashboard.shared) and never imports the producer API app."""
