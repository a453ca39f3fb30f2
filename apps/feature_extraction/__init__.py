"""HDDI-style feature extraction: input parser, Brill-style tagger, maximal noun phrases."""
