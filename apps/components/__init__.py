"""Connected components: paper 002's hypercube algorithm on an edge list (root vectors)."""
