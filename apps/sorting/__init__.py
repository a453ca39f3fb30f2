"""Sorting: paper 000 §VII-D pipeline sort and paper 003 master/worker block sort."""
