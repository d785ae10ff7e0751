"""Feature databases: every frame of many clips as normalised, searchable features."""

from motionmatch.database.database import DatabaseError, MotionDatabase
from motionmatch.database.schema import FeatureSchema, FeatureTerm, SchemaError, default_schema, schema_by_name
from motionmatch.database.tags import TagQueryError, tag_mask
from motionmatch.database.weights import SearchWeights, WeightsError

__all__ = ["DatabaseError", "FeatureSchema", "FeatureTerm", "MotionDatabase", "SchemaError", "SearchWeights",
           "TagQueryError", "WeightsError", "default_schema", "schema_by_name", "tag_mask"]
