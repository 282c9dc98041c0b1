-- Rich fields and one interaction schema (spec §17). `field_rules`: a single-value question's bounds, as a form
-- field's (`{"min", "max", "step", "widget", "min_items", "max_items", "columns", "min_rows", "max_rows"}`), NULL when
-- it has none. `response_schema`: the JSON Schema a question was asked with, as given (its `fields` were made from
-- it, and answers are validated against it too), NULL for a question asked with `fields` or none.
ALTER TABLE questions ADD COLUMN field_rules TEXT;
ALTER TABLE questions ADD COLUMN response_schema TEXT;
