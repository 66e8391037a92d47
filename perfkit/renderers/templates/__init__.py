"""Jinja2 templates of the HTML renderer (a package so that the templates ship with perfkit)."""
