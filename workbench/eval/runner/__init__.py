"""The runner process (untrusted, one per candidate): fork server, sandbox, candidate loading, launch tracking;
imports nothing of workbench/dispatch/ or judge/."""
