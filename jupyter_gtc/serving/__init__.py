"""Serving (issue 27): Vertex's serving container contract, our LM server, a replica's launcher and an endpoint's front."""
