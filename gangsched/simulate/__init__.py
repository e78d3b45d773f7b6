"""`gangsched simulate`: the scheduler run offline on a file of manifests."""
