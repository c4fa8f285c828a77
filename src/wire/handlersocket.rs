// placeholder until the codec lands
