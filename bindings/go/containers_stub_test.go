package mcpgw_test

func stopContainers() {}
