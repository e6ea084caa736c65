"""Skills: folders of instructions listed in the system prompt and loaded on demand, inline or"""

from hookmesh.middleware.builtin.skills._middleware import (
    DEFAULT_INTRO,
    SKILL_FILE,
    Skill,
    SkillContext,
    SkillError,
    SkillsMiddleware,
)

__all__ = [
    "DEFAULT_INTRO",
    "SKILL_FILE",
    "Skill",
    "SkillContext",
    "SkillError",
    "SkillsMiddleware",
]
