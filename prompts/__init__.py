"""Prompt templates, loaded as package resources."""
