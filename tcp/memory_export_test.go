package tcp

// ConnMemory is what the memory budget is charged per connection.
const ConnMemory = connMemory
