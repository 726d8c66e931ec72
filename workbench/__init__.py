"""The Dissipation Workbench: where did the score go between retrieval and answer?"""

__version__ = "0.1.0"
