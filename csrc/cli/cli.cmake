# cli
