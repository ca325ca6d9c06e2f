"""Services: the actions behind the api, built on the core (spec, state, backends)."""
