# placeholder: the hashing unit's sources (owned by the hashing work)
