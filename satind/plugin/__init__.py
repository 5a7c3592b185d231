"""Plugins: the Plugin descriptor, and finding, vetting and loading plugin modules.

A plugin is an application: a spawnable entry function plus what satind needs to run it by
name (``descriptor``: ``Plugin``, the run kinds, the errors of a plugin's own code).

Plugins are found in three places, later ones overriding earlier ones by name:

1. the built-ins, modules of the ``satind_plugins`` package;
2. installed distributions' entry points in the group ``satind.plugins``;
3. each ``--plugin-path DIR``: every ``*.py`` directly in DIR that assigns ``PLUGIN`` or
   ``PLUGIN_<anything>`` at its top level — found by parsing the files, never by running
   them (``plugin_files``) — imported as ``satind_path_plugins.<file stem>`` so that every
   peer, given the same directory, names its spawnable functions the same way. The other
   files of DIR run only as a plugin's own imports. DIR is a package root: a plugin imports
   its sibling modules (``import helper``, or ``from . import helper``), and its code hash
   covers every ``*.py`` under DIR, so a changed helper is a changed plugin. ``rescan``
   loads them again (``satind plugins reload``, SIGHUP).

The modules of 2 and 3 are vetted before they are imported here (satind/vetting.py): one
whose import fails, exits or hangs is not loaded, with a line saying which and why, and
costs nothing else.

One mechanism per module: ``descriptor`` (what a plugin is), ``discovery`` (finding the
candidate modules and their code versions without running them), ``importing`` (importing
one module in this process and taking its plugins) and ``loading`` (vetting, then loading
what came through; reloading; a plugin by name). Import every name from ``satind.plugin``.
"""

from __future__ import annotations

from satind.descriptor import UNMET as UNMET
from satind.descriptor import CheckFailed as CheckFailed
from satind.descriptor import NotChecked as NotChecked
from satind.descriptor import Plugin as Plugin
from satind.descriptor import PluginFailed as PluginFailed
from satind.descriptor import RunKind as RunKind
from satind.descriptor import UnknownPlugin as UnknownPlugin
from satind.descriptor import UsageError as UsageError
from satind.descriptor import driven as driven
from satind.plugin.discovery import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from satind.plugin.discovery import is_plugin_name as is_plugin_name
from satind.plugin.discovery import plugin_files as plugin_files
from satind.plugin.importing import PATH_PACKAGE as PATH_PACKAGE
from satind.plugin.importing import NoPlugin as NoPlugin
from satind.plugin.importing import describe_failure as describe_failure
from satind.plugin.importing import load_entry_point as load_entry_point
from satind.plugin.importing import load_path_module as load_path_module
from satind.plugin.loading import Discovery as Discovery
from satind.plugin.loading import Verdict as Verdict
from satind.plugin.loading import discover as discover
from satind.plugin.loading import find as find
from satind.plugin.loading import load as load
from satind.plugin.loading import rescan as rescan
from satind.plugin.loading import vet_plugins as vet_plugins
