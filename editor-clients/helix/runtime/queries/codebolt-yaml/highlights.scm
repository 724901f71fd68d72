; inherits: yaml
