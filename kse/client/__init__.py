"""The client side of the kse API: channels (here), and later the clientset and informers."""
