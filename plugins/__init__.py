"""satind's built-in application plugins (installed as ``satind_plugins``)."""
