"""Facts about one trace that several rules read, each computed once per trace."""
