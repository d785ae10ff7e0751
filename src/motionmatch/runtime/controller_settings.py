"""The settings of a :class:`~motionmatch.runtime.controller.Controller`: one immutable
object passed at construction (seconds, metres, m/s)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ControllerSettings"]


@dataclass(frozen=True)
class ControllerSettings:
    """Knobs of :class:`Controller` (seconds, metres, m/s)."""

    search_interval: float = 0.1
    search_method: str = "box"
    inertialization: str = "quintic"   # "quintic" | "spring" | "none"
    blend_time: float = 0.3            # quintic blend duration
    spring_halflife: float = 0.08      # spring inertialization half-life
    trajectory_mode: str = "spring"    # "spring" | "linear" (ablation)
    velocity_halflife: float = 0.2
    facing_halflife: float = 0.2
    transition_ratio: float = 0.9      # switch only if best cost < ratio * cost of continuing
    same_clip_window: int = 10         # a match this close ahead in the same clip just continues
    reselect_history: float = 0.5      # ... and in locomotion, one of the plain search this close behind (s)
    #                                    too: no replay of what was just shown (0: off, the behaviour before)
    sharp_turn_deg: float = 45.0
    idle_speed: float = 0.2
    idle_seconds: float = 3.0          # length of the standing stretch idle plays (chosen from the data; 0: none,
    #                                    idle keeps matching with a standing query, the ablation)
    foot_locking: bool = True
    foot_unlock_distance: float = 0.25
    foot_blend_time: float = 0.2       # fade-out of a released lock
    foot_lock_in_time: float = 0.1     # fade-in of a new lock (no pop when the foot still moves)
    jump_duration: float = 1.2         # a jump's length without a vertical spring fitted to the data
    jump_settle: float = 0.3           # with one: how long the jump lasts after the spring lands
    punch_recoil: float = 0.6          # a punch plays on this long after its strike (the arm drawn back)
    vertical_spring: bool = True       # the paper's vertical spring where the data allows it (False: the ablation)
    adjust_halflife: float = 0.2       # root adjustment toward the simulated root (0: off)
    adjust_max_ratio: float = 0.5      # ... at most this fraction of the root motion's own speed, plus
    adjust_min_speed: float = 0.2      # ... this much (m/s), and as much turning (rad/s * 2)
    sim_max_distance: float = 0.5      # the simulated root stays within this distance of the character
    locomotion_tags: str = "!dance & !creep & !jump & !punch"
