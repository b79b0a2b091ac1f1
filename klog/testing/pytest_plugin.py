"""pytest plugin registered by klog's entry point; the broker fixtures live here."""
