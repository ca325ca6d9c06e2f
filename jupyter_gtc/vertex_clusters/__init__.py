"""Vertex AI training clusters (``modelDevelopmentClusters``, v1beta1): a client over
google-auth's ``AuthorizedSession`` and JSON (``client.py``; no typed client, proto or discovery
document exists), and Google's errors made into messages that name the fix (``errors.py``)."""
