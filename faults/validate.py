"""Check fault names, options and cluster size before a run starts (one-line errors)."""
from __future__ import annotations

from collections.abc import Sequence

from faults import registry
from faults.context import FaultError
from faults.schedule import FaultSpec, ScheduleError
from faults.targets import TargetError, check_fixed


def validate(faults: Sequence[str | FaultSpec], nodes: Sequence[str],
             fixed_targets: Sequence[str] = ()) -> list[FaultSpec]:
    """The faults as specs, fixed targets filled in; FaultError for the first problem.

    `faults` are names or `name:key=value` texts, `nodes` the cluster's node
    names, `fixed_targets` the nodes for `fixed-*` faults that name none.
    """
    specs = []
    for fault in faults:
        try:
            spec = fault if isinstance(fault, FaultSpec) else FaultSpec.parse(fault)
        except ScheduleError as error:
            raise FaultError(str(error)) from None
        registration = registry.lookup(spec.name)
        options = dict(spec.options)
        if fixed_targets and "targets" in registration.options() and "targets" not in options:
            options["targets"] = list(fixed_targets)
        nemesis = registry.create(spec.name, **options)
        needed = getattr(nemesis, "min_nodes", 1)
        if len(nodes) < needed:
            raise FaultError(f"fault {spec.name} needs at least {needed} nodes; the cluster has {len(nodes)}")
        if "targets" in options:
            try:
                check_fixed(options["targets"], nodes)
            except TargetError as error:
                raise FaultError(f"fault {spec.name}: {error}") from None
        specs.append(FaultSpec(spec.name, options))
    return specs
