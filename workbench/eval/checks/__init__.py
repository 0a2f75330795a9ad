"""The anti-cheating flag table, static scans and the runtime checks the judge applies."""
