"""Motion data: skeletons, clips, BVH files, kinematics and clip processing."""

from motionmatch.anim import quat
from motionmatch.anim.bvh import load_bvh, parse_bvh, save_bvh
from motionmatch.anim.motion import Motion, concatenate
from motionmatch.anim.skeleton import Skeleton

__all__ = ["Motion", "Skeleton", "concatenate", "load_bvh", "parse_bvh", "quat", "save_bvh"]
