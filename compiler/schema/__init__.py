"""JSON Schema keywords -> grammar nodes: types, objects, arrays, strings, numbers, $ref and
allOf merged, oneOf/not/if by intersection and difference; notes of what is not enforced."""
