"""Sensors: each watches one kind of live object while the script runs and owns its record.

A record is plain data with no torch import (the live rules read it); `inspection.Inspection` holds
one record per sensor and `inspector.Inspector` installs the sensors' patches and assembles it.
"""
